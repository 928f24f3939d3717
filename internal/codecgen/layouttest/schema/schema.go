package schema

// Job is a root type. Owner and Pol were added after layout 1.
type Job struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
	Parts []Part `json:"parts"`
	Pod   Pod    `json:"pod"`
	Owner string `json:"owner" codec:"since=2"`
	Pol   *Pol   `json:"pol" codec:"since=3"`
}

// Part is written inline, in a slice. On was added in layout 2.
type Part struct {
	K  string `json:"k"`
	On bool   `json:"on" codec:"since=2"`
}

// Pod had a hand-written layout 0: a flags byte, then X when its bit 0 is
// set.
type Pod struct {
	X int64 `json:"x"`
}

// Pol is written behind a pointer.
type Pol struct {
	N int64 `json:"n"`
}
