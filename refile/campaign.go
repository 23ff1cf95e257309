package refile

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/signature"
)

// CampaignOf names the campaign of a verdict, the same for the daemon and
// the evaluation; "" when the verdict names none (unsigned, a store
// error, no key to name it by). It is the store's campaign (issue 15),
// as the verdict header and the log line name it, when the store counts
// campaigns; otherwise a name from the message's first I-Match key:
// copies that share it are the same text to I-Match. That name is a hash
// ("i" and 16 hex digits): it reveals no key in logs or the state file.
func CampaignOf(v detect.Verdict) string {
	if v.Err != nil || v.Unsigned || v.Analysis == nil {
		return ""
	}
	if id := v.CampaignID(); id != "" {
		return id
	}
	for i, k := range v.Analysis.Keys {
		if k.Family == signature.FamilyIMatch && i < len(v.IDs) {
			h := fnv.New64a()
			h.Write([]byte(v.IDs[i]))
			return fmt.Sprintf("i%016x", h.Sum64())
		}
	}
	return ""
}

// Note is what the daemon does after every verdict, and the evaluation
// after every copy: a verdict that makes its campaign bulk (for everyone
// without a vote of their own) sends the campaign's remembered copies to
// be moved; any other is remembered with its copies. A verdict that
// names no campaign is left alone.
func (r *Refiler) Note(v detect.Verdict, copies []Copy, at time.Time) {
	c := CampaignOf(v)
	switch {
	case c == "":
	case v.Base:
		r.Crossed(c, v.IDs, at)
	default:
		r.Remember(c, copies, at)
	}
}
