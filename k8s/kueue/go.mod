module taugrid.test/k8s/kueue

go 1.26.0

require sigs.k8s.io/kueue v0.17.0
