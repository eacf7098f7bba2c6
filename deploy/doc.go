// Package deploy holds no code: its tests check the deployment artifacts at
// the repository root, the Dockerfile and the Helm chart in helm/walkstage.
//
// The chart tests run the helm CLI (helm lint, helm template) and decode every
// rendered manifest strictly into the Kubernetes API types, so a field the API
// does not know fails the test instead of being dropped by the API server.
// They read stage/config/config.go to learn the WALKSTAGE_* variables; they import
// none of the stage's packages.
//
// Without helm on PATH, in ./bin or in $(go env GOPATH)/bin the chart tests
// skip, unless WALKSTAGE_REQUIRE_HELM=1 (scripts/test.sh sets it and installs
// the pinned helm into ./bin). By hand:
//
//	go install helm.sh/helm/v3/cmd/helm@v3.22.0
//
// The Dockerfile test reads .ci/run (WALKSTAGE_CI_RUN names another copy).
package deploy
