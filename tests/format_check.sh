#!/bin/sh
# scripts/format on one file: --check names it and fails while it is not
# formatted, formatting it makes the check pass, and a second formatting
# changes nothing. Usage: format_check.sh TOP DIR (DIR: a scratch directory).
# Exits 77 (skipped) without clang-format 14.
set -eu
top=$1
dir=$2
mkdir -p "$dir"
f=$dir/sample.c
printf 'struct s {\n    int a; /* one */\n    char *b;  /* two */\n};\nint f( int x ){ return x+1; }\n' >"$f"
rc=0
out=$("$top/scripts/format" --check "$f" 2>&1) || rc=$?
case $rc in
1) ;;
2)
	echo "skipped: $out"
	exit 77
	;;
*)
	echo "FAIL: --check exited $rc on an unformatted file: $out"
	exit 1
	;;
esac
case $out in
"$f"*) ;;
*)
	echo "FAIL: --check did not name the file first: $out"
	exit 1
	;;
esac
"$top/scripts/format" "$f"
want=$(printf 'struct s {\n\tint a;   /* one */\n\tchar *b; /* two */\n};\nint f(int x)\n{\n\treturn x + 1;\n}')
if [ "$(cat "$f")" != "$want" ]; then
	echo "FAIL: formatted as"
	cat "$f"
	exit 1
fi
"$top/scripts/format" --check "$f"
cp "$f" "$f.before"
"$top/scripts/format" "$f"
cmp "$f" "$f.before"
echo "PASS format_check"
