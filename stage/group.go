package stage

import "sync"

// group runs actors together, after Prometheus's run.Group: when the first
// actor returns, every actor's interrupt is called, and run returns once
// all have returned, with the first error any of them reported.
type group struct {
	actors []actor
}

type actor struct {
	name      string
	execute   func() error
	interrupt func()
}

func (g *group) add(name string, execute func() error, interrupt func()) {
	g.actors = append(g.actors, actor{name, execute, interrupt})
}

func (g *group) run() error {
	if len(g.actors) == 0 {
		return nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	first := <-errs
	var once sync.Once
	once.Do(func() {
		for _, a := range g.actors {
			a.interrupt()
		}
	})
	for range len(g.actors) - 1 {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}
