# bash completion for charter. Commands and options come from charter itself (`charter help
# --commands`, `charter COMMAND --help`), so completion follows the installed version.

_charter()
{
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    local global="--url --token --tenant --timeout-ms --connect-timeout-ms --json --verbose --help --version"

    case $prev in
        --url|--token|--tenant|--timeout-ms|--connect-timeout-ms|--task|--limit|--after|--title|\
        --content|--parent|--tools|--recipients|--resources|--workflow)
            return 0 ;;
        --content-file|--key)
            COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        --mode)
            COMPREPLY=($(compgen -W "scripted live external" -- "$cur")); return 0 ;;
    esac

    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            --url|--token|--tenant|--timeout-ms|--connect-timeout-ms) ((i++)) ;;
            -*) ;;
            *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done

    if [ -z "$cmd" ]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$global" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" help --commands 2>/dev/null)" -- "$cur"))
        fi
        return 0
    fi
    if [ "$cmd" = help ]; then
        COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" help --commands 2>/dev/null)" -- "$cur"))
        return 0
    fi
    if [[ $cur == -* ]]; then
        local opts
        opts=$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u)
        # A command's help names the global options too: offer each once.
        COMPREPLY=($(compgen -W "$(printf '%s\n' $opts $global | sort -u)" -- "$cur"))
        return 0
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _charter charter
