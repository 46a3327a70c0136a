package clientconfig_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/clientconfig"
)

func ExampleAttach() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "claude_desktop_config.json")
	original := `{
  "mcpServers": {
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "other": {"command": "other-server"}
  }
}
`
	if err := os.WriteFile(path, []byte(original), 0o600); err != nil {
		log.Fatal(err)
	}
	locs := clientconfig.LocationsIn(clientconfig.ClaudeDesktop, path, nil)

	reps, err := clientconfig.Attach(locs, []string{"files"}, &clientconfig.AttachOptions{Executable: "/usr/local/bin/mcptape"})
	if err != nil {
		log.Fatal(err)
	}
	attached, _ := os.ReadFile(path)
	fmt.Printf("%s: %s\n%s", reps[0].Results[0].Name, reps[0].Results[0].Action, attached)

	if _, err := clientconfig.Detach(locs, []string{"files"}); err != nil {
		log.Fatal(err)
	}
	restored, _ := os.ReadFile(path)
	fmt.Println("restored byte for byte:", string(restored) == original)
	// Output:
	// files: attached
	// {
	//   "mcpServers": {
	//     "files": {"command": "/usr/local/bin/mcptape", "args": ["wrap", "--name", "files", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
	//     "other": {"command": "other-server"}
	//   }
	// }
	// restored byte for byte: true
}
