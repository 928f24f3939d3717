package placement

// Contended is contended, for the tests.
var Contended = contended
