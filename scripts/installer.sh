# Sourced by scripts/setup.sh and scripts/setup_vllm.sh: `choose_installer VENV` sets INSTALL to
# the command that installs packages into VENV -- uv where it installs (parallel downloads and
# unpacking: torch in 6 s where pip took 16 s, the CPU lock in 12 s where pip took 13-34 s, on a
# 2-core EPYC), else pip without its serial byte-compilation (the callers compile afterwards).
# Either way the same pinned versions. uv reads no pip configuration, so pip's index,
# extra indexes and find-links (where a machine may keep its CPU torch) are passed on, with
# pip's choice of the best version across all of them.
choose_installer() {
  local venv=$1 pip=("$1/bin/python" -m pip --disable-pip-version-check) setting value
  if "${pip[@]}" install -q uv==0.13.9 >/dev/null 2>&1 && "$venv/bin/uv" --version >/dev/null 2>&1; then
    INSTALL=("$venv/bin/uv" pip install --python "$venv/bin/python" -q --index-strategy unsafe-best-match)
    value=${PIP_INDEX_URL:-$("${pip[@]}" config get global.index-url 2>/dev/null || true)}
    [ -n "$value" ] && INSTALL+=(--default-index "$value")
    for setting in extra-index-url:PIP_EXTRA_INDEX_URL find-links:PIP_FIND_LINKS; do
      local env_name=${setting#*:} option=${setting%%:*}
      value=${!env_name:-$("${pip[@]}" config get "global.$option" 2>/dev/null || true)}
      for v in $value; do INSTALL+=("--$option" "$v"); done
    done
  else
    "${pip[@]}" install -q --upgrade "pip>=24"
    INSTALL=("${pip[@]}" install -q --no-compile)
  fi
}
