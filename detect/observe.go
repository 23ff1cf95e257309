package detect

import "time"

// Observer is told what became of each message; the daemon's metrics
// (*metrics.Metrics) implement it. Like the store's observer and those of
// the milter and feedback packages, it is defined here, where it is used,
// so that the pipeline never imports Prometheus: the daemon plugs its
// metrics in, and offline commands observe nothing.
type Observer interface {
	// Message counts one verdict (Verdict.Outcome) and its processing time.
	Message(verdict string, d time.Duration)
	Signature(family, outcome string) // one family's outcome: "signed" or why it declined
	Volume(family string, v int64)    // a family's volume at verdict time
	Override(scope, kind string)      // feedback changed the verdict
	Defect(kind string)               // a defect extraction worked around
	Truncated()                       // the message was analysed on what fit the limits
	SlowAnalysis()                    // the analysis took longer than Options.SlowAnalysis
	Level(level int, kind string)     // a judged message's bulk level and kind (KindDeclared, KindUndeclared)
	Error(stage string)               // a failed stage (StageStore)
	SenderExempt(verdict string)      // a message of Options.ExceptSenders, by the verdict it was exempt from
}

// Verdict outcomes, the values Observer.Message is given (the metric's
// verdict label).
const (
	OutcomeBulk     = "bulk"
	OutcomeNotBulk  = "not_bulk"
	OutcomeUnsigned = "unsigned" // no family could sign the message
	OutcomeError    = "error"    // the store failed: the failure policy decides
)

// StageStore is the stage Observer.Error is given when the store fails.
const StageStore = "store"

// nop observes nothing.
type nop struct{}

func (nop) Message(string, time.Duration) {}
func (nop) Signature(string, string)      {}
func (nop) Volume(string, int64)          {}
func (nop) Override(string, string)       {}
func (nop) Defect(string)                 {}
func (nop) Truncated()                    {}
func (nop) SlowAnalysis()                 {}
func (nop) Level(int, string)             {}
func (nop) Error(string)                  {}
func (nop) SenderExempt(string)           {}
