// Package suitetest holds a fixed suite of results, for the tests of the
// packages that render suites (tables, charts).
package suitetest
