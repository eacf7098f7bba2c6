// Package source is walkstage's Kafka side: it reads requests from the
// input topic as a member of a consumer group and writes what goes back to
// Kafka. It holds
//   - the Consumer (consumer.go): each fetched record decoded with
//     message.DecodeRequest against the graph served, handed on as a
//     Delivery with its trace context (trace.go) and an acknowledgement;
//   - the group and its partition readers (group.go, topics.go): one reader
//     per assigned partition, fetching through kafka-go's Client, reading a
//     replaced log (a topic created again, a broker back without its data)
//     from its new start;
//   - the in-order offset commits (tracker.go): a partition's offset
//     advances only past records every one of which is acknowledged;
//   - the dead-letter copy of a rejected record, bounded to what the topic
//     takes (bound.go), and the index of copies already written, so a
//     redelivered rejection is not copied twice (dlqindex.go);
//   - the completion-event Publisher and the client options, TLS and SASL
//     (kafka.go), and the once-per-window log of broker errors (oncelog.go).
//
// What a request or an event is, and how a message decodes, is package
// message's; source knows the records they travel in. It is the only
// package that knows offsets exist: the stage gets each request with an
// acknowledgement (Delivery.Ack) and calls it once the batch's output and
// event are durable.
package source
