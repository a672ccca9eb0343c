#!/bin/sh
# tgid and role of every process of user uxtest and of the X server, as procfs::role names them
for p in $(pgrep -u uxtest) $(pgrep -x Xvfb); do
  r=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -oE -- '--type=[a-z-]+( .*--utility-sub-type=[A-Za-z._]+)?' | sed -E 's/ .*--utility-sub-type=/:/')
  [ -n "$r" ] || r=$(cat /proc/$p/comm)
  [ "$p" = "$(pgrep -u uxtest -o -x chromium)" ] && r=browser
  echo "$p $r"
done
