package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

const bashCompletion = `# bash completion for farm; load with: source <(farm completion bash)
_farm() {
  local cur words
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  if [[ "$cur" == -* ]]; then
    words+=("$cur")
  fi
  COMPREPLY=($(compgen -W "$("${words[@]}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
  if [ ${#COMPREPLY[@]} -eq 0 ]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o default -F _farm farm
`

const zshCompletion = `# zsh completion for farm; load with: source <(farm completion zsh)
autoload -U +X bashcompinit && bashcompinit
` + bashCompletion

func completionCmd() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash or zsh)",
		ArgsUsage: "bash|zsh",
		Description: "EXAMPLES:\n   source <(farm completion bash)     # in ~/.bashrc\n" +
			"   source <(farm completion zsh)      # in ~/.zshrc",
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			default:
				return usagef("completion takes one argument: bash or zsh")
			}
			return nil
		},
	}
}
