package store

// NoMergeForTest makes e run the model without the stored merge, as a
// Redis Cluster does (TestStoresAgree).
func NoMergeForTest(e *Embedded) { e.noMerge = true }

// PerSlotForTest makes r's Cluster calls one a slot, as before a Cluster
// took one a primary (or as on a server older than 7.0).
func PerSlotForTest(r *Redis, on bool) { r.perSlot.Store(on) }

// CrossSlotForTest reports whether r takes one call a primary.
func CrossSlotForTest(r *Redis) bool { return r.xslot.Load() && !r.perSlot.Load() }
