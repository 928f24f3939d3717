// Command workload is the program the example jobs run in their
// containers. It is built static (CGO_ENABLED=0) into the demo image, a root
// filesystem that holds only it, and does what its arguments say:
//
//	workload primes N          count the primes up to N and print the count
//	workload serve PORT COUNT  answer COUNT requests on 127.0.0.1:PORT, then exit
//	workload ask PORT N        ask the server on 127.0.0.1:PORT to count the
//	                           primes up to N (retrying the connection for 10s)
//	workload http-serve [-port NAME] [-requests N] [-timeout D]
//	                           serve HTTP on 0.0.0.0 at the pod's port NAME
//	                           (SLUICE_PORT_<NAME>, default http), answering
//	                           each GET with the task's ID and the request's
//	                           number; exit 0 after N requests (default 1),
//	                           fail if D (default 1m) passes first
//	workload fetch [-group G] [-port NAME] [-path P] [-wait D] [-token-file F]
//	                           find the running task of group G (default
//	                           server) of this task's job (SLUICE_JOB_ID) in
//	                           the dispatcher's task listing (SLUICE_ADDR),
//	                           GET P (default /) at its host and its port
//	                           NAME (default http) and print the answer;
//	                           try again until D (default 1m) passes. The
//	                           token is file F's, else SLUICE_TOKEN's, else
//	                           none (where the dispatcher takes requests
//	                           without one); with authentication on it must
//	                           be a reader's
//	workload shard N           count the primes in this task's shard of 0..N:
//	                           shard SLUICE_TASK_INDEX of SLUICE_TASK_COUNT
//	workload tally IN OUT      count the primes up to each number of file IN
//	                           (whitespace-separated) and write a line for
//	                           each to file OUT, whole or not at all
//	workload sleep DURATION    sleep, then exit 0
//	workload burn [-duty F] [-period D] [-memory BYTES] [-duration D]
//	                           allocate BYTES (default 0, such as 256Mi) and
//	                           touch every page, then on one thread compute
//	                           for F (default 1) of every period D (default
//	                           100ms) and sleep the rest, for -duration
//	                           (default 0: until stopped): a pod that asks
//	                           for much and uses a set share of it
//	workload env               print the variables the node sets (SLUICE_*),
//	                           sorted, one NAME=value a line
//	workload id                print the user and group it runs as and
//	                           whether it may create a file at / (rootfs=
//	                           writable, read-only or denied)
//
// It runs as PID 1 of its container, which has no default signal actions,
// so it exits with 143 on SIGTERM itself.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		os.Exit(143)
	}()
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: workload primes N | shard N | serve PORT COUNT | ask PORT N | http-serve [FLAGS] | fetch [FLAGS] | burn [FLAGS] | tally IN OUT | sleep DURATION | env")
	}
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "primes" && len(rest) == 1:
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 0 {
			return fmt.Errorf("primes: %q is not a count", rest[0])
		}
		fmt.Printf("%d primes up to %d\n", primes(n), n)
		return nil
	case cmd == "shard" && len(rest) == 1:
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 0 {
			return fmt.Errorf("shard: %q is not a count", rest[0])
		}
		index, err1 := strconv.Atoi(os.Getenv("SLUICE_TASK_INDEX"))
		count, err2 := strconv.Atoi(os.Getenv("SLUICE_TASK_COUNT"))
		if err1 != nil || err2 != nil || count < 1 || index < 0 || index >= count {
			return errors.New("shard: SLUICE_TASK_INDEX and SLUICE_TASK_COUNT name no shard: run it as a task of an array")
		}
		lo, hi := shard(n, index, count)
		fmt.Printf("shard %d of %d: %d primes in [%d, %d)\n", index, count, primes(hi-1)-primes(lo-1), lo, hi)
		return nil
	case cmd == "serve" && len(rest) == 2:
		count, err := strconv.Atoi(rest[1])
		if err != nil {
			return fmt.Errorf("serve: %q is not a count", rest[1])
		}
		return serve(rest[0], count)
	case cmd == "ask" && len(rest) == 2:
		return ask(rest[0], rest[1])
	case cmd == "http-serve":
		return httpServeCmd(rest, os.Stdout)
	case cmd == "burn":
		return burnCmd(rest, os.Stdout)
	case cmd == "fetch":
		return fetchCmd(context.Background(), rest, os.Stdout)
	case cmd == "env" && len(rest) == 0:
		var env []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "SLUICE_") {
				env = append(env, kv)
			}
		}
		slices.Sort(env)
		for _, kv := range env {
			fmt.Println(kv)
		}
		return nil
	case cmd == "id" && len(rest) == 0:
		fmt.Printf("uid=%d gid=%d rootfs=%s\n", os.Getuid(), os.Getgid(), rootfsAccess())
		return nil
	case cmd == "tally" && len(rest) == 2:
		return tally(rest[0], rest[1])
	case cmd == "sleep" && len(rest) == 1:
		d, err := time.ParseDuration(rest[0])
		if err != nil {
			return fmt.Errorf("sleep: %w", err)
		}
		time.Sleep(d)
		fmt.Println("slept", d)
		return nil
	}
	return fmt.Errorf("unknown command %q", strings.Join(args, " "))
}

// tally counts the primes up to each number of file in and writes a line
// for each to file out: to a temporary file beside it first, renamed over
// it once complete, so that out is whole or absent.
func tally(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("tally: %w", err)
	}
	var lines strings.Builder
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return fmt.Errorf("tally: %s: %q is not a count", in, f)
		}
		fmt.Fprintf(&lines, "%d primes up to %d\n", primes(n), n)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, []byte(lines.String()), 0o644); err != nil {
		return fmt.Errorf("tally: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tally: %w", err)
	}
	fmt.Print(lines.String())
	fmt.Println("wrote", out)
	return nil
}

// shard returns shard index of count of the numbers 0..n-1: [lo, hi),
// the shards together covering them once.
func shard(n, index, count int) (lo, hi int) {
	return n * index / count, n * (index + 1) / count
}

// primes counts the primes up to n with a sieve.
func primes(n int) int {
	if n < 2 {
		return 0
	}
	composite := make([]bool, n+1)
	count := 0
	for i := 2; i <= n; i++ {
		if composite[i] {
			continue
		}
		count++
		for j := i * i; j <= n; j += i {
			composite[j] = true
		}
	}
	return count
}

// serve answers count requests: each is a line holding N, answered with
// the number of primes up to N.
func serve(port string, count int) error {
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer l.Close()
	fmt.Println("serving on", l.Addr())
	for i := 0; i < count; i++ {
		c, err := l.Accept()
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil {
			var n int
			if n, err = strconv.Atoi(strings.TrimSpace(line)); err == nil {
				_, err = fmt.Fprintf(c, "%d\n", primes(n))
				fmt.Printf("answered primes up to %d\n", n)
			}
		}
		c.Close()
		if err != nil {
			return fmt.Errorf("serve: request %d: %w", i, err)
		}
	}
	return nil
}

// ask sends n to the server and prints its answer.
func ask(port, n string) error {
	var c net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err = net.Dial("tcp", "127.0.0.1:"+port); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	defer c.Close()
	if _, err := fmt.Fprintln(c, n); err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	fmt.Printf("the server counted %s primes up to %s\n", strings.TrimSpace(answer), n)
	return nil
}

// rootfsAccess says whether a file may be created at the root of the
// filesystem: "writable" (and removes it), "read-only" or "denied".
func rootfsAccess() string {
	const probe = "/.workload-probe"
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	switch {
	case err == nil:
		f.Close()
		os.Remove(probe)
		return "writable"
	case errors.Is(err, syscall.EROFS):
		return "read-only"
	case errors.Is(err, os.ErrPermission):
		return "denied"
	}
	return "error: " + err.Error()
}
