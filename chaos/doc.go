// Package chaos holds walkstage's chaos suite, in its tests only: it runs
// the real `walkstage run` binary as a child process against a standalone
// Kafka-protocol broker process (internal/testbroker/cmd/kfakebroker) and a
// versitygw S3 gateway process, kills the stage with SIGKILL mid-batch,
// stops the broker and the object store with SIGSTOP while batches are in
// flight, feeds it hundreds of bad messages, and then checks that nothing
// was lost, duplicated, dangling or falsely dead-lettered. Issue 32's
// faults come on top: an S3 fault proxy (internal/s3fault) between the
// stage and versitygw, versitygw SIGKILLed and restarted, the broker
// restarted with its log lost, the topics recreated, the input topic
// created late, oversized headers and keys, expensive requests beside
// small ones; and checks that every event's objects read back match their
// manifest, that no partition stays stuck and that no offset is skipped
// silently. At the end, with every writer stopped, it runs `walkstage
// output tidy` and checks that a glob over each output kind reads exactly
// the committed parts and rows (issue 33). docs/chaos.md lists them all.
//
//	go test ./chaos                          # short form (CI): 3 kills, 10 s outages, 100 bad messages, every fault in small doses
//	WALKSTAGE_CHAOS=full go test -timeout 30m -v ./chaos   # full form: 20 kills, 60 s outages, 500 bad messages, every fault at full strength
//	WALKSTAGE_CHAOS_SEED=N ...               # replay a run (the seed is printed)
//	WALKSTAGE_CHAOS_FAULTS=s3,kills ...      # only these faults (-name: all but it)
//	WALKSTAGE_CHAOS_S3=success-lost-ack ...  # only these S3 faults
//
// It knows the stage only from outside: its environment, its topics, its
// bucket and its HTTP endpoints, as an operator would.
package chaos
