#!/bin/sh
# Installed by Converge (examples/links.policy) as /opt/ops/bin/healthcheck.
# Exit 0 when the basics of a host are fine, 1 otherwise, with one line per
# problem on stderr. Used by the load balancer agent and by humans.
set -u

status=0
problem() {
    echo "healthcheck: $*" >&2
    status=1
}

# Root file system less than 90% full.
used=$(df --output=pcent / | tail -n 1 | tr -dc '0-9')
[ "$used" -lt 90 ] || problem "root file system ${used}% full"

# Clock synchronised.
if command -v timedatectl >/dev/null 2>&1; then
    timedatectl show -p NTPSynchronized --value | grep -qx yes || problem "clock not synchronised"
fi

# No failed systemd units.
if command -v systemctl >/dev/null 2>&1; then
    failed=$(systemctl list-units --state=failed --no-legend | wc -l)
    [ "$failed" -eq 0 ] || problem "$failed failed systemd unit(s)"
fi

exit "$status"
