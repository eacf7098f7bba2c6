package graph

import "syscall"

const mapPopulate = syscall.MAP_POPULATE
