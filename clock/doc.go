// Package clock is Sluice's one source of time for code that waits: the
// Clock interface, the system clock, channel-based tickers and alarms
// built on any Clock, and a Manual clock whose time moves only when a test
// says so.
//
// Code that takes a Clock never reads time.Now or arms time's timers for
// its own loops, so that its tests run on a Manual clock instead of
// sleeping. Waits that stand for the operating system's timing (a process
// to exit, a socket deadline) stay on real time.
//
// The package imports nothing of Sluice's; internal/lint's layering table
// says which packages may use it.
package clock
