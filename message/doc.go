// Package message holds walkstage's messages, independent of the topics
// they travel on: the requests the stage reads and the completion events
// it writes (docs/reference/messages.md is the contract). It holds
//   - the request model (request.go): Request, ready for an engine (Job),
//     the Limits a deployment sets, and RejectError with its stable Reason;
//   - the decoder (decode.go): DecodeRequest reads a version 1 request
//     (wirev1.go) in strict JSON, where encoding/json is lenient
//     (strictjson.go: no nulls, exact names, no duplicates), and validates
//     it against the graph served and the Limits, seeds as integer or
//     string ids (seeds.go);
//   - output "visits" (visits.go) and the sampling algorithms (sample.go),
//     the request's Fingerprint that tells a redelivery from a conflicting
//     batch id (fingerprint.go);
//   - the completion Event (event.go) and the bounds of what the stage
//     derives from a message: a batch id from a key, a log field (bound.go).
//
// It must not know Kafka (records, headers, offsets and the dead-letter
// copy are package source's), the sink, or how walks run (gpu, engines):
// it needs the graph and the parameter types of walk, walk/visits and
// graphsample only to validate a request and to describe its job
// (scripts/check-imports.sh holds it to that).
package message
