// Package outputcmd is `walkstage output`: reading what the stage or
// walkstage walk wrote to object storage by its manifests (ls lists the
// committed parts of an output kind) and removing parts no manifest lists
// (tidy). Package main puts Commands in its table under "output".
package outputcmd
