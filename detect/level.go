package detect

import (
	"fmt"
	"time"
)

// Levels grade a verdict from 0 to 9, as Microsoft 365's Bulk Complaint
// Level does (its default, standard and strict policies file mail at 7, 6
// and 5 and above), so that each user or site picks how much bulk mail to
// file away. The mapping (docs/levels.md):
//
//   - 0: not bulk: the message was seen once (no recipient but these got
//     anything like it) and users' feedback did not mark it bulk, or
//     users' feedback cleared it for everyone.
//   - 1–4: below the threshold (X-Bulk: no), by the highest family's
//     volume relative to its threshold: under a quarter, a half, three
//     quarters, and up to the threshold.
//   - 5–9: at or above the threshold (X-Bulk: yes), by volume relative to
//     the threshold: 5 under twice it, 6 under 5×, 7 under 20×, 8 under
//     100×, 9 beyond; then one up for mass mail that does not declare
//     itself (kind=undeclared), one down for mass mail that does
//     (kind=declared), one up for a campaign that reached the threshold
//     within an hour of its first copy, one up when users' feedback marked
//     it bulk for everyone; kept within 5–9.
//
// So "yes" still means at or above the threshold, and level ≥ 5 means
// "yes"; the level never falls when only the volume grows
// (TestLevelMonotoneInVolume).
const (
	LevelBulk    = 5 // the lowest level of a bulk verdict
	LevelMax     = 9
	fastInterval = time.Hour // a campaign this young at the threshold grew fast
)

// levelInput is what a level is computed from.
type levelInput struct {
	bulk     bool    // the base verdict (recipients without own votes)
	seen     int64   // the highest volume: family or campaign
	ratio    float64 // the highest volume relative to its threshold
	declared bool
	fast     bool // reached the threshold within fastInterval
	cleared  bool // global "not bulk" feedback decided
	forced   bool // global "bulk" feedback decided
}

// level maps a verdict to 0–9 and says why, in words for explain and the
// docs.
func level(in levelInput) (int, []string) {
	switch {
	case in.cleared:
		return 0, []string{"users' feedback: not bulk"}
	case in.seen == 0 && !in.forced:
		return 0, []string{"not seen before"}
	case in.seen <= 1 && !in.forced:
		return 0, []string{"seen once"}
	}
	why := []string{fmt.Sprintf("volume %.2f× the threshold", in.ratio)}
	if !in.bulk {
		l := 4
		switch {
		case in.ratio < 0.25:
			l = 1
		case in.ratio < 0.5:
			l = 2
		case in.ratio < 0.75:
			l = 3
		}
		return l, why
	}
	l := 9
	switch {
	case in.ratio < 2:
		l = 5
	case in.ratio < 5:
		l = 6
	case in.ratio < 20:
		l = 7
	case in.ratio < 100:
		l = 8
	}
	if in.declared {
		l--
		why = append(why, "declared: -1")
	} else {
		l++
		why = append(why, "undeclared: +1")
	}
	if in.fast {
		l++
		why = append(why, fmt.Sprintf("reached the threshold within %s: +1", fastInterval))
	}
	if in.forced {
		l++
		why = append(why, "users' feedback: bulk: +1")
	}
	return min(max(l, LevelBulk), LevelMax), why
}
