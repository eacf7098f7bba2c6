package config

import (
	"io"
	"log/slog"

	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/internal/logkeys"
	"github.com/walkstage/walkstage/internal/redact"
)

// NewLogger builds the slog logger the configuration asks for. Every
// record passes through redact, as configured URLs (and errors quoting
// them) carry credentials.
func NewLogger(c Config, w io.Writer) *slog.Logger {
	lvl, err := parseLogLevel(c.LogLevel)
	if err != nil {
		lvl = slog.LevelInfo
	}
	ho := &slog.HandlerOptions{Level: lvl, ReplaceAttr: logkeys.Seconds}
	if c.LogFormat == "text" {
		return slog.New(redact.Handler(slog.NewTextHandler(w, ho)))
	}
	return slog.New(redact.Handler(slog.NewJSONHandler(w, ho)))
}

// EngineSettings are c's engine settings.
func (c Config) EngineSettings() engines.Settings {
	gpus, _ := engines.ParseGPUs(c.GPUs)              // validated by Load
	part, _ := engines.ParsePartition(c.GPUPartition) // likewise
	stream, _ := engines.ParseStream(c.GPUStream)     // likewise
	return engines.Settings{Workers: c.CPUWorkers, FusedTableBytes: c.CPUFusedTableBytes,
		EagerLabelTables: c.CPULabelTables == "eager", HostMemoryLimit: c.HostMemoryLimit, GPUMemoryLimit: c.GPUMemoryLimit, GPUs: gpus,
		GPUPartition: part, GPUStream: stream, GPULentChunks: c.GPULendChunks, GPUBatchSlots: c.GPUBatchSlots,
		HybridReorderBytes: c.OutputMemoryBytes / 2}
}
