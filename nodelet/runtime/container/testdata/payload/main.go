// Command payload is the program the container runtime's tests run inside
// their containers. It is built static (CGO_ENABLED=0) and copied into a
// test rootfs. It performs its arguments as steps, left to right:
//
//	print TEXT      write TEXT and a newline to stdout
//	eprint TEXT     write TEXT and a newline to stderr
//	sleep DUR       sleep for DUR (a Go duration, or seconds)
//	exit CODE       exit with CODE
//	alloc MB        allocate and touch MB mebibytes, and keep them
//	spin SECONDS    burn CPU on all threads for SECONDS
//	listen PORT     accept one TCP connection on 127.0.0.1:PORT, print the line it sends
//	dial PORT TEXT  connect to 127.0.0.1:PORT (retrying for 10s), send TEXT
//	ignoreterm      ignore SIGTERM from now on
//	status          print the CapEff, NoNewPrivs and Uid lines of /proc/self/status
//	cat FILE        copy FILE to stdout
//	flood BYTES     write BYTES bytes of 'x' lines to stdout
//	stat FILE       print FILE's mode and owner
//
// As PID 1 of its container it has no default signal actions, so it exits
// with 143 on SIGTERM itself, as a process killed by SIGTERM would report.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

var ignoreTerm atomic.Bool

var keep [][]byte

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		for range sigs {
			if !ignoreTerm.Load() {
				os.Exit(143)
			}
		}
	}()
	args := os.Args[1:]
	arg := func() string {
		if len(args) == 0 {
			fail("missing argument")
		}
		a := args[0]
		args = args[1:]
		return a
	}
	for len(args) > 0 {
		switch cmd := arg(); cmd {
		case "print":
			fmt.Println(arg())
		case "eprint":
			fmt.Fprintln(os.Stderr, arg())
		case "sleep":
			a := arg()
			d, err := time.ParseDuration(a)
			if err != nil {
				d = time.Duration(atoi(a)) * time.Second
			}
			time.Sleep(d)
		case "exit":
			os.Exit(atoi(arg()))
		case "alloc":
			mb := atoi(arg())
			for range mb {
				b := make([]byte, 1<<20)
				for i := 0; i < len(b); i += 4096 {
					b[i] = 1
				}
				keep = append(keep, b)
			}
		case "spin":
			end := time.Now().Add(time.Duration(atoi(arg())) * time.Second)
			done := make(chan struct{})
			for range runtime.NumCPU() {
				go func() {
					for time.Now().Before(end) {
					}
					done <- struct{}{}
				}()
			}
			for range runtime.NumCPU() {
				<-done
			}
		case "listen":
			ln, err := net.Listen("tcp", "127.0.0.1:"+arg())
			check(err)
			c, err := ln.Accept()
			check(err)
			line, err := bufio.NewReader(c).ReadString('\n')
			check(err)
			fmt.Print("got: " + line)
			c.Close()
			ln.Close()
		case "dial":
			addr, text := "127.0.0.1:"+arg(), arg()
			var c net.Conn
			var err error
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if c, err = net.Dial("tcp", addr); err == nil {
					break
				}
			}
			check(err)
			_, err = fmt.Fprintln(c, text)
			check(err)
			c.Close()
		case "ignoreterm":
			ignoreTerm.Store(true)
		case "status":
			b, err := os.ReadFile("/proc/self/status")
			check(err)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "NoNewPrivs:") || strings.HasPrefix(l, "Uid:") {
					fmt.Println(l)
				}
			}
		case "cat":
			b, err := os.ReadFile(arg())
			check(err)
			os.Stdout.Write(b)
		case "stat":
			f := arg()
			st, err := os.Lstat(f)
			check(err)
			sys := st.Sys().(*syscall.Stat_t)
			fmt.Printf("%s %v %d:%d\n", f, st.Mode(), sys.Uid, sys.Gid)
		case "flood":
			n := atoi(arg())
			line := []byte(strings.Repeat("x", 99) + "\n")
			for ; n > 0; n -= len(line) {
				os.Stdout.Write(line)
			}
		default:
			fail("unknown step " + strconv.Quote(cmd))
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	check(err)
	return n
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "payload:", msg)
	os.Exit(99)
}
