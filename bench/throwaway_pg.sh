# Sourced by the bench scripts that sweep into databases of their own (result_diff.sh,
# sweep_pair.sh): a throwaway PostgreSQL cluster under "$work/pg" on a free loopback port
# (fsync off: results are thrown away), stopped when the script exits, and `psql` on it
# (unaligned, tab-separated, no footer).
#   work=DIR; source bench/throwaway_pg.sh   ->  $port, psql ...
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=()
if [[ $(id -u) -eq 0 ]]; then as_pg=(runuser -u postgres --); chown postgres "$work"; fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$pgbin/initdb" -D "$work/pg" -U touchstone -A trust >/dev/null
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pg.log" -w -o \
  "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off" start >/dev/null
trap '"${as_pg[@]}" "$pgbin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null' EXIT
psql() { "$pgbin/psql" -h 127.0.0.1 -p "$port" -U touchstone -X -q -A -P footer=off -F $'\t' "$@"; }
