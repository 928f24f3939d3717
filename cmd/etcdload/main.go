// Command etcdload drives an etcd cluster with storebench's writers and
// prints what it measured as one JSON object (storebench.Result): the
// anchor side of `sluice bench raftkv`, which runs it. It is a binary of its
// own so that the sluice binary — which every container's init re-executes —
// does not carry etcd's gRPC client (a third of its size and half of its
// package initialization).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluicehq/sluice/bench/storebench"
)

// Exit codes.
const (
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdload:", err)
		if errors.As(err, new(usageError)) {
			os.Exit(exitUsage)
		}
		os.Exit(exitError)
	}
}

type usageError struct{ error }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("etcdload", flag.ContinueOnError)
	endpoints := fs.String("endpoints", "", "the cluster's client URLs, comma-separated")
	var cfg storebench.Config
	fs.IntVar(&cfg.Writers, "writers", 256, "concurrent writers, each with one write in flight")
	fs.IntVar(&cfg.ValueBytes, "value-bytes", 256, "bytes per value")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "how long to write before measuring")
	ready := fs.Duration("ready-timeout", 30*time.Second, "how long to wait for the cluster to take a first write")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if *endpoints == "" {
		return usageError{errors.New("--endpoints is required")}
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	s := store{cli}
	if err := s.waitReady(ctx, *ready); err != nil {
		return err
	}
	r, err := storebench.Drive(ctx, s, cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// store is a storebench.Store over an etcd client: a Put returns once etcd
// has committed it.
type store struct{ cli *clientv3.Client }

func (s store) Put(ctx context.Context, key string, value []byte) error {
	_, err := s.cli.Put(ctx, key, string(value))
	return err
}

// waitReady writes until the cluster takes a write or timeout passes.
func (s store) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.Put(wctx, "bench/ready", []byte("1"))
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("etcd did not take a write within %v: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
