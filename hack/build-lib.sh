# shellcheck shell=bash
# The build helpers shared by hack/build-*.sh, and cpu_seconds for hack/test.sh and hack/run-tests.sh
# (sourced; build needs $root, the repo).

# The wrapper go.mod files must agree with hack/versions.env, the single source of versions;
# fail loudly instead of caching a binary under the wrong version key.
require_version() { # <module dir> <module path> <expected version>
    local got
    got=$(awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' \
        "$1/go.mod")
    if [[ $got != "$3" ]]; then
        echo "error: $1/go.mod requires $2 $got but hack/versions.env says $3" >&2
        exit 1
    fi
}

# CPU seconds (user and system) used so far by a shell's finished children (this script's, or the shell
# whose PID is given: a lane's $BASHPID): a build's CPU time tells what it costs on any machine, where its
# wall time depends on the cores and on what else runs.
cpu_seconds() {
    local f
    read -ra f <"/proc/${1:-$$}/stat"
    echo $(((f[15] + f[16]) / $(getconf CLK_TCK)))
}

# Build tags of a wrapper module: the comma-separated line of its build-tags file, if it has one (read by
# hack/go-download.sh too, so that it fetches only the modules such a build links).
build_tags() { # <module dir>
    if [[ -f $1/build-tags ]]; then cat "$1/build-tags"; fi
}

# build <module dir> <package> <output path> <ldflags> [source file...]
build() {
    local dir=$1 pkg=$2 out=$3 ldflags=$4 inputs tags
    shift 4
    tags=$(build_tags "$dir")
    # The path is keyed by version only; this hash of everything else that goes into the binary
    # (wrapper go.mod/go.sum, flags, and the sources of a program of ours) catches edits that keep the
    # version.
    inputs=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$pkg $ldflags${tags:+ tags $tags}") "$@" |
        sha256sum | cut -c1-16)
    if [[ -x $out && $(cat "$out.inputs" 2>/dev/null) == "$inputs" ]]; then
        echo "cached: $out"
        return
    fi
    mkdir -p "$(dirname "$out")"
    echo "building $pkg -> $out"
    local start=$SECONDS cpu
    cpu=$(cpu_seconds)
    # Static binaries (as upstream releases them); write to a temp name and rename so that an
    # interrupted build never leaves a truncated binary that a later run would treat as cached.
    # GOGC=400: the compiler collects garbage less often, for a little more memory (a build of oras took
    # 12 % less CPU time than at the default 100).
    CGO_ENABLED=0 GOGC=${GOGC:-400} go -C "$root/$dir" build -trimpath -tags "$tags" \
        -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg"
    mv -f "$out.tmp" "$out"
    echo "$inputs" >"$out.inputs"
    echo "built $(basename "$out") in $((SECONDS - start))s, CPU $(($(cpu_seconds) - cpu))s ($(du -h "$out" | cut -f1))"
}
