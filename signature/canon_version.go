package signature

// CanonVersion is the version of canonicalisation (Canonicalize); signature
// versions include it, so counts made with old tokens never mix with new
// ones.
//
// TEMPORARY: canon.go on branch issue3-text defines the same constant.
// Delete this file when both branches are merged.
const CanonVersion = 1
