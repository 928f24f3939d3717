package scripttest_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/scripttest"
)

const script = `# a comment
echo a
----
a

echo b c
----
b
c

# trailing
`

func TestParseFormatRoundTrip(t *testing.T) {
	blocks, err := scripttest.Parse(script)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[0].Cmd != "echo a" || blocks[0].Line != 2 || blocks[1].Want != "b\nc" || blocks[2].Cmd != "" {
		t.Fatalf("blocks %+v", blocks)
	}
	got := []string{"a", "b\nc", ""}
	if out := scripttest.Format(blocks, got); out != script {
		t.Fatalf("format:\n%s\nwant:\n%s", out, script)
	}
	if out := scripttest.Format(blocks, []string{"x", "y", ""}); !strings.Contains(out, "echo a\n----\nx\n") {
		t.Fatalf("format with new outputs:\n%s", out)
	}
}

func TestParseRefusesCommandWithoutSeparator(t *testing.T) {
	_, err := scripttest.Parse("# c\necho a\na\n")
	if err == nil || !strings.Contains(err.Error(), `line 2: command "echo a" not followed by ----`) {
		t.Fatalf("err %v", err)
	}
}

func TestRunCommandsInOrder(t *testing.T) {
	var seen []string
	scripttest.Run(t, func(t *testing.T) func(string) string {
		return func(cmd string) string {
			seen = append(seen, cmd)
			return strings.Join(strings.Fields(cmd)[1:], "\n")
		}
	})
	if strings.Join(seen, ";") != "echo a;echo b c" {
		t.Fatalf("commands run %q", seen)
	}
}
