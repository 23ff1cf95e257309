package signature

import "flag"

// update rewrites golden files (and the fixture lexicon).
//
// TEMPORARY: canon_golden_test.go on branch issue3-text declares the same
// flag. Delete this file when both branches are merged.
var update = flag.Bool("update", false, "rewrite golden files")
