//go:build unix && !linux

package graph

const mapPopulate = 0
