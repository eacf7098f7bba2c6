package stage

import (
	"log/slog"
	"sync"
)

// group runs actors together, after Prometheus's run.Group: when the first
// actor returns, every actor's interrupt is called, and run returns once
// all have returned, with the first error any of them reported. Each step
// is logged by actor name, so a shutdown that hangs says on whom.
type group struct {
	log    *slog.Logger
	actors []actor
}

type actor struct {
	name      string
	execute   func() error
	interrupt func()
}

type actorDone struct {
	name string
	err  error
}

func (g *group) add(name string, execute func() error, interrupt func()) {
	g.actors = append(g.actors, actor{name, execute, interrupt})
}

func (g *group) run() error {
	if len(g.actors) == 0 {
		return nil
	}
	log := g.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	done := make(chan actorDone, len(g.actors))
	for _, a := range g.actors {
		go func() { done <- actorDone{a.name, a.execute()} }()
	}
	first := <-done
	if first.err != nil {
		log.Error("actor failed; stopping the stage", "actor", first.name, "err", first.err)
	} else {
		log.Debug("actor finished; stopping the others", "actor", first.name)
	}
	var once sync.Once
	once.Do(func() {
		for _, a := range g.actors {
			log.Debug("stopping", "actor", a.name)
			a.interrupt()
		}
	})
	err := first.err
	for range len(g.actors) - 1 {
		d := <-done
		log.Debug("stopped", "actor", d.name, "err", d.err)
		if err == nil {
			err = d.err
		}
	}
	return err
}
