package corpus_test

import (
	"fmt"
	"strings"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
)

func ExampleOptions_Walk() {
	opts := corpus.Options{
		// Only the spam folder of the archive.
		Filter: func(name string) bool { return strings.HasPrefix(name, "enron1/spam/") },
	}
	err := opts.Walk("testdata/enron1.tar.gz", func(m *corpus.Message) error {
		fmt.Printf("%s %s %q\n", m.Label, m.Name, m.Data)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// spam enron1/spam/0003.2004-01-01.GP.spam.txt "Subject: cheap meds\n\nbuy now\n"
	// spam enron1/spam/0004.2004-01-02.GP.spam.txt "Subject: only a subject\n\n"
}
