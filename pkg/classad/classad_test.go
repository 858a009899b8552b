package classad

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Ad
	}{
		{"query answer, old syntax", "MultipleFileSupport = true\nPluginVersion = \"0.2\"\nPluginType = \"FileTransfer\"\nSupportedMethods = \"gsiftp,ftp\"\n",
			[]Ad{{{"MultipleFileSupport", true}, {"PluginVersion", "0.2"}, {"PluginType", "FileTransfer"}, {"SupportedMethods", "gsiftp,ftp"}}}},
		{"two results, new syntax", `[ TransferSuccess = true; TransferTotalBytes = 12; TransferUrl = "ftp://h/a" ]
[ TransferSuccess = false; TransferError = "550 \"a\\b\" not found"; TransferErrorData = [ ErrorType = "Transfer" ]; Tries = { 1, 2.5 } ]`,
			[]Ad{{{"TransferSuccess", true}, {"TransferTotalBytes", int64(12)}, {"TransferUrl", "ftp://h/a"}},
				{{"TransferSuccess", false}, {"TransferError", `550 "a\b" not found`}, {"TransferErrorData", Ad{{"ErrorType", "Transfer"}}}, {"Tries", []any{int64(1), 2.5}}}}},
		{"multi-line record, comments", "[\n  // a comment\n  A = undefined;\n  B = -3\n]\n", []Ad{{{"A", nil}, {"B", int64(-3)}}}},
		{"old records split by a blank line", "A = 1\n\nA = 2\n", []Ad{{{"A", int64(1)}}, {{"A", int64(2)}}}},
		{"empty", "  \n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrorsArePositioned(t *testing.T) {
	for in, want := range map[string]string{
		`[ A = "open ]`:           "1:",
		"[ A = 1\n  B = 2 ]":      "2:3: want ';' or ']' after attribute A",
		`[ A = B + 1 ]`:           "B is an expression",
		"A = 1 B = 2":             "want the end of the line",
		strings.Repeat("[A=", 40): "nested deeper",
	} {
		_, err := Parse([]byte(in))
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", in, err, want)
		}
	}
}

func TestLookupIsCaseInsensitive(t *testing.T) {
	ad := Ad{{"TransferSuccess", true}, {"TransferTotalBytes", int64(3)}, {"TransferError", "x"}}
	if b, ok := ad.Bool("transfersuccess"); !ok || !b {
		t.Error("Bool")
	}
	if n, ok := ad.Int("TRANSFERTOTALBYTES"); !ok || n != 3 {
		t.Error("Int")
	}
	if _, ok := ad.String("TransferSuccess"); ok {
		t.Error("a boolean read as a string")
	}
}

func TestFormatRoundTrips(t *testing.T) {
	ad := Ad{{"Url", "gsiftp://h/a \"b\"\\c\n\x01"}, {"LocalFileName", "/tmp/x"}, {"N", int64(-7)}, {"F", 0.5},
		{"B", false}, {"U", nil}, {"Sub", Ad{{"E", "t"}}}, {"L", []any{int64(1), "two"}}}
	got, err := Parse([]byte(ad.Format() + "\n" + ad.Format()))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Ad{ad, ad}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"A = 1\nB = \"x\"\n", `[ TransferSuccess = true; TransferUrl = "ftp://h/a" ]`,
		"[ A = [ B = { 1, 2, \"\\101\" } ] ]", "/* c */ [A=1][B=2]", "A = \"\\", "[A=1e99999]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ads, err := Parse(data)
		if err != nil {
			return
		}
		// What parses formats into text that parses to the same records.
		var b strings.Builder
		for _, ad := range ads {
			b.WriteString(ad.Format() + "\n")
		}
		again, err := Parse([]byte(b.String()))
		if err != nil {
			t.Fatalf("formatted %q does not parse: %v", b.String(), err)
		}
		if len(again) != len(ads) {
			t.Fatalf("%d records became %d", len(ads), len(again))
		}
	})
}
