package store

// NoMergeForTest makes e run the model without the stored merge, as a
// Redis Cluster does (TestStoresAgree).
func NoMergeForTest(e *Embedded) { e.noMerge = true }
