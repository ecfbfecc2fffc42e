#!/bin/sh
# netns_rsh.sh HOST COMMAND...: Open MPI's remote-shell agent for two_hosts.sh (plm_rsh_agent).
# HOST is an address of the test's virtual link; the command runs in the network namespace
# that owns it, with its own host name (UTS namespace), as ssh would run it on that host.
host=$1
shift
ns=$(cat "$CTNN_NETNS_DIR/$host.ns") || { echo "netns_rsh.sh: no namespace for host '$host'" >&2; exit 255; }
exec ip netns exec "$ns" unshare --uts sh -c "hostname '$ns' && exec sh -c \"\$0\"" "$*"
