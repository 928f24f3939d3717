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
//	listenon ADDR   accept one TCP connection on ADDR (host:port), print the line it sends
//	dialto ADDR TEXT  connect to ADDR (host:port, retrying for 10s), send TEXT
//	get URL         HTTP GET URL (retrying for 10s), print the body
//	ifaces          print each network interface's name and addresses
//	ignoreterm      ignore SIGTERM from now on
//	status          print the CapEff, NoNewPrivs and Uid lines of /proc/self/status
//	cat FILE        copy FILE to stdout
//	flood BYTES     write BYTES bytes of 'x' lines to stdout
//	stat FILE       print FILE's mode and owner
//	ps              print "PID ARGS" for each process in /proc, by PID
//	fork TEXT       start a copy of itself that prints TEXT and sleeps 60s, and leave it
//	waitproc TEXT   wait (up to 10s) for another process whose arguments hold TEXT
//	waitgone TEXT   wait (up to 10s) until no other process's arguments hold TEXT
//	                and those waitproc TEXT found are reaped
//	write FILE TEXT write TEXT to FILE, replacing it
//	fill FILE BYTES write BYTES zero bytes to FILE, replacing it, and sync it
//	waitfile FILE TEXT  wait (up to 10s) until FILE exists and holds TEXT, and print it
//	waitchange FILE wait (up to 10s) until FILE's content changes, and print "changed: " and it
//
// As PID 1 of its container it has no default signal actions, so it exits
// with 143 on SIGTERM itself, as a process killed by SIGTERM would report.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
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
		case "listen", "listenon":
			addr := arg()
			if cmd == "listen" {
				addr = "127.0.0.1:" + addr
			}
			acceptLine(addr)
		case "dial", "dialto":
			addr, text := arg(), arg()
			if cmd == "dial" {
				addr = "127.0.0.1:" + addr
			}
			sendLine(addr, text)
		case "get":
			url := arg()
			var resp *http.Response
			var err error
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if resp, err = http.Get(url); err == nil {
					break
				}
			}
			check(err)
			b, err := io.ReadAll(resp.Body)
			check(err)
			resp.Body.Close()
			fmt.Printf("%s\n", b)
		case "ifaces":
			ifs, err := net.Interfaces()
			check(err)
			for _, i := range ifs {
				addrs, err := i.Addrs()
				check(err)
				fmt.Print(i.Name)
				for _, a := range addrs {
					fmt.Print(" ", a)
				}
				fmt.Println()
			}
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
		case "ps":
			for _, p := range procs() {
				fmt.Printf("%d %s\n", p.pid, p.args)
			}
		case "fork":
			cmd := exec.Command("/proc/self/exe", "print", arg(), "sleep", "60s")
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			check(cmd.Start())
		case "waitproc", "waitgone":
			text := arg()
			end := time.Now().Add(10 * time.Second)
			for {
				pids := matching(text)
				if cmd == "waitproc" && len(pids) > 0 {
					seen[text] = pids
					break
				}
				if cmd == "waitgone" && len(pids) == 0 && reaped(seen[text]) {
					break
				}
				if time.Now().After(end) {
					fail(cmd + " " + text + ": timed out")
				}
				time.Sleep(20 * time.Millisecond)
			}
		case "write":
			f, text := arg(), arg()
			check(os.WriteFile(f, []byte(text), 0o644))
		case "fill":
			f, n := arg(), atoi(arg())
			out, err := os.Create(f)
			check(err)
			buf := make([]byte, 64<<10)
			for n > 0 {
				w, err := out.Write(buf[:min(n, len(buf))])
				check(err)
				n -= w
			}
			check(out.Sync())
			check(out.Close())
		case "waitfile":
			f, text := arg(), arg()
			end := time.Now().Add(10 * time.Second)
			for {
				b, err := os.ReadFile(f)
				if !errors.Is(err, os.ErrNotExist) {
					check(err)
				}
				if err == nil && strings.Contains(string(b), text) {
					os.Stdout.Write(b)
					break
				}
				if time.Now().After(end) {
					fail("waitfile " + f + ": timed out; it holds " + strconv.Quote(string(b)))
				}
				time.Sleep(20 * time.Millisecond)
			}
		case "waitchange":
			f := arg()
			first, err := os.ReadFile(f)
			check(err)
			end := time.Now().Add(10 * time.Second)
			for {
				b, err := os.ReadFile(f)
				check(err)
				if string(b) != string(first) {
					fmt.Printf("changed: %s", b)
					break
				}
				if time.Now().After(end) {
					fail("waitchange " + f + ": timed out")
				}
				time.Sleep(20 * time.Millisecond)
			}
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

// acceptLine accepts one TCP connection on addr and prints the line it
// sends.
func acceptLine(addr string) {
	ln, err := net.Listen("tcp", addr)
	check(err)
	c, err := ln.Accept()
	check(err)
	line, err := bufio.NewReader(c).ReadString('\n')
	check(err)
	fmt.Print("got: " + line)
	c.Close()
	ln.Close()
}

// sendLine connects to addr, retrying for 10s, and sends text as a line.
func sendLine(addr, text string) {
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
}

type proc struct {
	pid  int
	args string
}

// procs lists the processes of /proc, by PID.
func procs() []proc {
	ents, err := os.ReadDir("/proc")
	check(err)
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, proc{pid, strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// seen holds the PIDs waitproc found, by the text it looked for.
var seen = map[string][]int{}

// matching lists the processes other than this one with text in their
// arguments.
func matching(text string) []int {
	var out []int
	for _, p := range procs() {
		if p.pid != os.Getpid() && strings.Contains(p.args, text) {
			out = append(out, p.pid)
		}
	}
	return out
}

// reaped reports whether none of pids is in /proc any more, not even as a
// zombie (whose arguments read empty).
func reaped(pids []int) bool {
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			return false
		}
	}
	return true
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
