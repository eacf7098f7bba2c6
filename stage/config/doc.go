// Package config is walkstage run's configuration: the Config type read
// from WALKSTAGE_* environment variables (Load, with every bad variable
// reported at once), the reference generated from Config's own field
// comments (`walkstage run -h`, docs/reference/configuration.md; the
// deploy tests hold the Helm chart to the same fields), and what a
// configuration builds before the stage exists: its logger and its engine
// settings.
//
// It reads the environment and nothing else: it opens no connection, loads
// no graph and knows nothing of how the stage uses a setting. It checks
// names that other packages own (compression codecs, GPU lists) with their
// own parsers, so a value the stage would refuse is refused here first.
package config
