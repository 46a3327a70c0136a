// Package clientconfig finds the config files in which MCP clients (Claude
// Desktop, Claude Code, Cursor, VS Code) list the servers they launch, and
// routes a server through `mcptape wrap` and back by editing its entry.
//
// # Finding configs
//
// [Locations] lists where a [Client] reads servers from, highest precedence
// first, with the default paths of macOS, Windows and Linux (see
// [ClaudeDesktopPath], [ClaudeCodeUserPath], [VSCodeUserPath]); project
// configs are looked up from the working directory up. [LocationsIn] reads
// a file named on the command line instead. [Servers] lists a Location's
// servers; [Find] says which Locations define a server name.
//
// # Editing without damage
//
// A config is the user's file, often edited by hand, sometimes also
// rewritten by the client. [Attach] changes exactly the "command" and "args"
// of one entry:
//
//	"command": "/usr/local/bin/mcptape",
//	"args": ["wrap", "--name", NAME, ("--data", DIR,) "--", COMMAND, ARGS...]
//
// It does so with its own small JSON reader that keeps the byte span of
// every value, replacing those two spans (or adding "args" after "command")
// in the layout of their surroundings: indentation, tabs, CRLF line ends, a
// compact one-line file. Every other byte of the file — other servers,
// unknown keys, key order, a missing final newline — stays as it was; the
// edit is re-read and checked before the file is replaced (a temporary file
// renamed over it, keeping its mode, refused if the file changed meanwhile).
// A file that is not valid JSON is refused with its line and column (a
// [ConfigError] holding a [SyntaxError]); VS Code's JSON with comments and
// trailing commas is read for VS Code only.
//
// # Putting it back
//
// Before the first change mcptape ever makes to a file it copies it to
// [BackupPath] (never overwritten). Attach saves the entry's text, as it was
// and as attach wrote it, in the file's [StatePath]. [Detach] puts the
// saved text back byte for byte when the entry is as attach left it, what
// else happened to the file meanwhile. When the entry itself was edited
// while attached, Detach puts back only its command and args and keeps the
// edits; when the saved copy is gone it rebuilds them from wrap's
// arguments. Both are idempotent: attaching an attached server or
// detaching one that is not attached changes nothing.
//
// # Servers that are not launched
//
// An entry with a "url" is a remote server over HTTP: wrap cannot run it.
// Its url is pointed at a route of a running recorder (`mcptape record
// --routes`, asked through its local API) instead; with no such recorder it
// is [Skipped] with [ErrHTTPServer], and when the recorder cannot take it
// (it serves one upstream, or the store's owner is a dashboard) it is
// Skipped with the recorder's reason, while the stdio servers are attached.
// Each [Transport] has a route (the route interface in attach.go).
//
// # Example
//
//	locs := clientconfig.Locations(clientconfig.ClaudeDesktop, nil)
//	exe, _ := os.Executable()
//	reps, err := clientconfig.Attach(locs, []string{"filesystem"},
//		&clientconfig.AttachOptions{Executable: exe})
//	if err != nil {
//		return err // an unknown name lists the names there are
//	}
//	fmt.Println(reps[0].Results[0].Action, "— now", clientconfig.ClaudeDesktop.Restart())
package clientconfig
