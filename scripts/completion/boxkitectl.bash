# bash completion for boxkitectl: commands, their options, sandbox names
# (from `boxkitectl sandbox list`, which needs root). Installed by
# `make install` into share/bash-completion/completions/boxkitectl.

_boxkitectl_sandboxes()
{
	# the binary as typed, so that ./build/boxkitectl completes too
	local bin=${COMP_WORDS[0]}
	"$bin" sandbox list 2>/dev/null | cut -f1
}

_boxkitectl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local commands="sandbox exec status inspect verify policy ready events top receipt call help"
	COMPREPLY=()

	# options that take a path, or a value we cannot guess
	case $prev in
	--admin-socket | --agent-socket | --shim-bin | --socket | --pubkey)
		COMPREPLY=($(compgen -f -- "$cur"))
		return 0
		;;
	--policy | --dns | --memory | --pids | --cpus | --timeout | --hold | --shim-env | --last | --wait | --interval | -n)
		return 0
		;;
	esac

	# the command: the first word that is not a global option
	local i=1 cmd= ci=0
	while [ "$i" -lt "$COMP_CWORD" ]; do
		case ${COMP_WORDS[i]} in
		--admin-socket) i=$((i + 2)); continue ;;
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; ci=$i; break ;;
		esac
		i=$((i + 1))
	done
	if [ -z "$cmd" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--admin-socket --help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		fi
		return 0
	fi

	# the command's arguments so far (after the command word)
	local n=$((COMP_CWORD - ci)) sub=${COMP_WORDS[ci+1]}
	case $cmd in
	sandbox)
		if [ "$n" -eq 1 ]; then
			COMPREPLY=($(compgen -W "create delete list" -- "$cur"))
		elif [ "$sub" = delete ] && [ "$n" -eq 2 ]; then
			COMPREPLY=($(compgen -W "$(_boxkitectl_sandboxes)" -- "$cur"))
		elif [ "$sub" = create ] && [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--policy --dns --agent-socket --shim-bin --shim-env --memory --pids --cpus --wait --no-wait --help" -- "$cur"))
		fi
		;;
	exec | inspect | verify)
		# after "--" the words are the sandboxed command's
		local j
		for ((j = ci + 1; j < COMP_CWORD; j++)); do
			[ "${COMP_WORDS[j]}" = -- ] && return 0
		done
		if [ "$n" -eq 1 ]; then
			if [[ $cur == -* ]]; then
				COMPREPLY=($(compgen -W "--help" -- "$cur"))
			else
				COMPREPLY=($(compgen -W "$(_boxkitectl_sandboxes)" -- "$cur"))
			fi
		elif [[ $cur == -* ]]; then
			case $cmd in
			exec) COMPREPLY=($(compgen -W "--timeout --json --stream --" -- "$cur")) ;;
			verify) COMPREPLY=($(compgen -W "--hold --json" -- "$cur")) ;;
			esac
		fi
		;;
	policy)
		if [ "$n" -eq 1 ]; then
			COMPREPLY=($(compgen -W "set unset" -- "$cur"))
		elif [ "$n" -eq 2 ]; then
			COMPREPLY=($(compgen -W "$(_boxkitectl_sandboxes)" -- "$cur"))
		fi
		;;
	events)
		if [ "$prev" = --pod ]; then
			COMPREPLY=($(compgen -W "$(_boxkitectl_sandboxes)" -- "$cur"))
		elif [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--follow --pod --json --last --help" -- "$cur"))
		fi
		;;
	top)
		[[ $cur == -* ]] && COMPREPLY=($(compgen -W "--interval -n --json --help" -- "$cur"))
		;;
	receipt)
		if [ "$n" -eq 1 ]; then
			COMPREPLY=($(compgen -W "pubkey verify" -- "$cur"))
		elif [ "$sub" = verify ] && [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--pubkey" -- "$cur"))
		elif [ "$sub" = verify ]; then
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		;;
	call)
		[ "$n" -eq 1 ] && COMPREPLY=($(compgen -W "--socket" -- "$cur"))
		;;
	help)
		[ "$n" -eq 1 ] && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		;;
	esac
	return 0
}
complete -F _boxkitectl boxkitectl
