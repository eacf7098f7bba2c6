// Command kfakebroker runs franz-go's in-memory Kafka-protocol broker
// (kfake) as a process of its own, for tests that must stop the broker
// (SIGSTOP/SIGCONT) or kill it independently of the test and of the stage
// under test. It is test tooling: nothing in the stage imports it.
//
// It prints one line per listener, "kfakebroker listening on HOST:PORT",
// once every listener accepts connections, then runs until SIGTERM or
// SIGINT. State lives in memory only: a SIGSTOP is an outage the broker
// comes back from with every record, a SIGKILL loses everything.
//
//	kfakebroker -topics in,out,dlq -partitions 4 -port 0
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kfakebroker:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kfakebroker", flag.ContinueOnError)
	ports := fs.String("port", "0", "comma-separated listen ports on 127.0.0.1, one per broker (0: any free port)")
	topics := fs.String("topics", "", "comma-separated topics to create at start-up")
	partitions := fs.Int("partitions", 1, "partitions of each topic in -topics")
	maxMessage := fs.Int("max-message-bytes", 32<<20, "largest record batch a produce may carry (broker message.max.bytes; topics inherit it)")
	minSession := fs.Duration("min-session-timeout", time.Second, "smallest consumer-group session timeout the broker accepts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ps []int
	for _, s := range strings.Split(*ports, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("-port: %q is not a port", s)
		}
		ps = append(ps, p)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(len(ps)),
		kfake.Ports(ps...),
		kfake.GroupMinSessionTimeout(*minSession),
		// The default (about 1 MiB) would refuse the large records tests
		// send on purpose; the limit under test is the stage's own.
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(*maxMessage)}),
	}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, a := range c.ListenAddrs() {
		fmt.Printf("kfakebroker listening on %s\n", a)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return nil
}
