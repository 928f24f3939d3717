// Package scripttest runs scripted tests: a script (testdata/*.txt) is a
// sequence of blocks, each a command line, a "----" line and the expected
// output, ended by a blank line. Blank lines and lines starting with '#'
// between blocks are kept as they are. With -rewrite the scripts' expected
// outputs are replaced by what the commands print, comments kept.
//
// What a command means is the caller's: Run hands each command line to the
// function that starts returned for the script, in order, and compares
// what it returns with the expected output.
package scripttest
