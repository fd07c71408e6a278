package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"gantry/bench"
)

// chunks records what a live log stored, in order.
type chunks struct {
	mu   sync.Mutex
	got  []string
	fail int // refuse this many stores first
	sent chan struct{}
}

func (c *chunks) store(_ context.Context, text []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("database unavailable")
	}
	c.got = append(c.got, string(text))
	if c.sent != nil {
		select {
		case c.sent <- struct{}{}:
		default:
		}
	}
	return nil
}

func (c *chunks) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// testLog is a live log whose timer never fires by itself: the test ticks it.
func testLog(c *chunks, secrets ...string) *LiveLog {
	l := NewLiveLog(context.Background(), c.store, nil, secrets...)
	l.every = time.Hour
	return l
}

func write(t *testing.T, l *LiveLog, s string) {
	t.Helper()
	n, err := l.Write([]byte(s))
	require.NoError(t, err)
	require.Equal(t, len(s), n)
}

func TestLiveLogCutsCompleteLines(t *testing.T) {
	c := &chunks{}
	l := testLog(c)
	write(t, l, "Initializing the backend...\nInitializing provider")
	require.Empty(t, c.all(), "nothing is stored before a tick, a full chunk or the end")
	l.tick()
	require.Equal(t, []string{"Initializing the backend...\n"}, c.all(), "a tick stores the complete lines")
	write(t, l, " plugins...\n- Finding")
	l.tick()
	require.Equal(t, []string{"Initializing the backend...\n", "Initializing provider plugins...\n"}, c.all(),
		"the line completed by the next write goes whole")
	l.tick()
	require.Equal(t, "- Finding", c.all()[2], "a line still incomplete a tick later goes as far as it is known")
	write(t, l, " sandbox\n")
	require.NoError(t, l.Close())
	require.Equal(t, " sandbox\n", c.all()[3], "the end stores the rest")
	write(t, l, "after the end\n")
	require.Len(t, c.all(), 4, "writes after Close are dropped")
	require.Equal(t, "Initializing the backend...\nInitializing provider plugins...\n- Finding sandbox\n", strings.Join(c.all(), ""))
}

func TestLiveLogStoresFullChunksAtOnce(t *testing.T) {
	c := &chunks{}
	l := testLog(c)
	line := strings.Repeat("x", 99) + "\n"
	write(t, l, strings.Repeat(line, 200)) // 20,000 bytes
	got := c.all()
	require.Equal(t, 3, len(got), "every complete line goes at once, in chunks of at most 8 KB, without a tick")
	for _, g := range got {
		require.LessOrEqual(t, len(g), LiveLogChunk)
		require.True(t, strings.HasSuffix(g, "\n"), "chunks end with a line")
	}
	require.NoError(t, l.Close())
	require.Equal(t, strings.Repeat(line, 200), strings.Join(c.all(), ""))
}

func TestLiveLogSplitsAVeryLongLine(t *testing.T) {
	c := &chunks{}
	l := testLog(c)
	long := strings.Repeat("é", 15000) // 30,000 bytes, no newline
	write(t, l, long)
	got := c.all()
	require.Equal(t, 3, len(got), "full chunks of the line go at once")
	for _, g := range got {
		require.LessOrEqual(t, len(g), LiveLogChunk)
		require.True(t, utf8.ValidString(g), "a chunk never cuts a character in two")
	}
	l.tick()
	require.Equal(t, long, strings.Join(c.all(), ""), "the rest of the line goes at the tick")
}

func TestLiveLogMasksASecretSplitAcrossWrites(t *testing.T) {
	const token = "eyJhbGciOiJFZERTQSJ9.workload-token"
	const password = "s3cr3t-state-pass"
	c := &chunks{}
	l := testLog(c, token, password, "")
	write(t, l, "token: eyJhbGciOiJF")
	l.tick() // a flush in the middle of the line, in the middle of the secret
	require.Equal(t, []string{"token: "}, c.all(), "the start of the secret is held back")
	write(t, l, "ZERTQSJ9.workload-token ok\nTF_HTTP_PASSWORD="+password)
	l.tick()
	write(t, l, "\nend: "+password[:5])
	require.NoError(t, l.Close())
	joined := strings.Join(c.all(), "")
	require.Equal(t, "token: "+Masked+" ok\nTF_HTTP_PASSWORD="+Masked+"\nend: s3cr3", joined,
		"a secret's start at the very end is no secret: nothing followed")
	for _, g := range c.all()[:len(c.all())-1] {
		for _, s := range []string{token, password} {
			for k := 4; k <= len(s); k++ {
				require.NotContains(t, g, s[:k], "a chunk holds a piece of a secret")
			}
		}
	}
}

func TestLiveLogMasksTheEscapedFormOfASecret(t *testing.T) {
	c := &chunks{}
	l := testLog(c, "pa\"ss\nword")
	write(t, l, "  + password = \"pa\\\"ss\\nword\"\n")
	require.NoError(t, l.Close())
	require.Equal(t, "  + password = \""+Masked+"\"\n", strings.Join(c.all(), ""))
}

func TestLiveLogMasksOverlappingSecretsWhole(t *testing.T) {
	c := &chunks{}
	l := testLog(c, "abc", "bcdef")
	write(t, l, "xab")
	l.tick()
	write(t, l, "c")
	l.tick()
	write(t, l, "def y\n")
	require.NoError(t, l.Close())
	require.Equal(t, "x"+Masked+" y\n", strings.Join(c.all(), ""), "nothing of either secret shows")
}

func TestLiveLogOffersARefusedChunkAgain(t *testing.T) {
	c := &chunks{fail: 1}
	l := testLog(c)
	write(t, l, "one\n")
	l.tick()
	require.Empty(t, c.all())
	write(t, l, "two\n")
	l.tick()
	require.NoError(t, l.Close())
	require.Equal(t, []string{"one\ntwo\n"}, c.all(), "nothing lost, order kept")
}

// TestLiveLogTicksByItself: with its own timer, a written line is stored without any
// further write.
func TestLiveLogTicksByItself(t *testing.T) {
	c := &chunks{sent: make(chan struct{}, 1)}
	l := NewLiveLog(context.Background(), c.store, nil)
	defer l.Close()
	write(t, l, "Still creating... [10s elapsed]\n")
	bench.Receive(t, "the live log's own tick to store the line", 30*time.Second, c.sent)
	require.Equal(t, []string{"Still creating... [10s elapsed]\n"}, c.all())
}

// FuzzLiveLogNeverLeaks writes text containing a secret in arbitrary pieces, ticking in
// between: no chunk, nor all of them together, shows the secret, and apart from the
// markers the text is the same as masking it whole.
func FuzzLiveLogNeverLeaks(f *testing.F) {
	f.Add("hunter2", "log in with hunter2 and hunter2hunter2\n", []byte{3, 9, 1, 0, 7})
	f.Add("ab", "aaabababbab\nab", []byte{1, 1, 1, 1, 1, 1})
	f.Add("a\nb", "xa\nb\na\n", []byte{2, 2})
	f.Add("éé", "ééé\né", []byte{1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, secret, text string, cuts []byte) {
		// Every input is tried: made into a secret and a text the log can hold (no NUL,
		// bounded), never thrown away.
		secret = strings.ReplaceAll(secret, "\x00", "")
		if secret == "" {
			secret = "s"
		}
		secret = secret[:min(len(secret), 256)]
		text = strings.ReplaceAll(text, "\x00", "")
		text = text[:min(len(text), 4096)]
		// The secret is in the text at least once, split wherever the cuts fall.
		text = text[:len(text)/2] + secret + text[len(text)/2:]
		c := &chunks{}
		l := testLog(c, secret)
		l.size = 64 // small chunks, to cut often
		rest := text
		for _, n := range cuts {
			k := min(int(n%16), len(rest))
			write(t, l, rest[:k])
			rest = rest[k:]
			if n&0x80 != 0 {
				l.tick()
			}
		}
		write(t, l, rest)
		require.NoError(t, l.Close())

		whole := l.secrets
		cover := (&LiveLog{secrets: whole}).coverage([]byte(text))
		want := strings.ReplaceAll(string(appendMasked(nil, []byte(text), cover)), Masked, "")
		joined := strings.Join(c.all(), "")
		require.Equal(t, want, strings.ReplaceAll(joined, Masked, ""), "text lost or kept that masking the whole would not")
		// A marker's own letters may complete a secret ("d]x" after "[masked]"): what
		// must never show is the secret in the text's own bytes.
		// Markers blanked byte for byte in the stream, then cut back into the chunks: a
		// chunk may end inside a marker ("[mas" | "ked]"), whose letters are not the
		// text's.
		blanked := strings.ReplaceAll(joined, Masked, strings.Repeat("\x00", len(Masked)))
		for _, s := range whole {
			require.NotContains(t, blanked, string(s))
			at := 0
			for _, g := range c.all() {
				require.NotContains(t, blanked[at:at+len(g)], string(s))
				at += len(g)
			}
		}
	})
}
