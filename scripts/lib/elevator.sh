# Sourced by the storage scripts: the disk under a directory and its elevator.
#   elevator_of DIR NAME     sets disk, queue (its queue/scheduler file) and was (the active
#                            elevator), or exits 2 naming what is missing; NAME prefixes errors.
elevator_of() {
    local dir=$1 name=$2 src
    src=$(findmnt -no SOURCE --target "$dir")
    disk=$(lsblk -no PKNAME "$src" 2>/dev/null | head -1)
    [ -n "$disk" ] || disk=$(basename "$src")
    queue=/sys/block/$disk/queue/scheduler
    [ -w "$queue" ] || { echo "$name: no elevator for $dir ($src → $disk)" >&2; exit 2; }
    was=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$queue")
}
