// Package chaos holds walkstage's chaos suite, in its tests only: it runs
// the real `walkstage run` binary as a child process against a standalone
// Kafka-protocol broker process (internal/testbroker/cmd/kfakebroker) and a
// versitygw S3 gateway process, kills the stage with SIGKILL mid-batch,
// stops the broker and the object store with SIGSTOP while batches are in
// flight, feeds it hundreds of bad messages, and then checks that nothing
// was lost, duplicated, dangling or falsely dead-lettered.
//
//	go test ./chaos                          # short form (CI): 3 kills, 10 s outages, 100 bad messages
//	WALKSTAGE_CHAOS=full go test -timeout 30m -v ./chaos   # full form: 20 kills, 60 s outages, 500 bad messages
//	WALKSTAGE_CHAOS_SEED=N ...               # replay a run (the seed is printed)
//
// It knows the stage only from outside: its environment, its topics, its
// bucket and its HTTP endpoints, as an operator would.
package chaos
