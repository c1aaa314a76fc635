package tck

import (
	"bufio"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const junitSample = `<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="2" skipped="2" tests="6">
<testcase classname="tests.compatibility.core_operations.test_requirements" name="test_must_requirement[CORE-SEND-001-jsonrpc]" time="0.1"/>
<testcase classname="tests.compatibility.core_operations.test_requirements" name="test_must_requirement[CORE-LIST-001-http_json]" time="0.1"><failure message="AssertionError: CORE-LIST-001 failed&#10;second line">trace</failure></testcase>
<testcase classname="tests.compatibility.grpc.test_status_codes.TestGrpcStatusCodes" name="test_task_not_found_returns_not_found" time="0.1"><error message="failed on setup">trace</error></testcase>
<testcase classname="tests.compatibility.core_operations.test_requirements" name="test_should_requirement[CORE-X-001-grpc]" time="0.1"><skipped type="pytest.xfail" message="SHOULD"/></testcase>
<testcase classname="tests.compatibility.agent_card.test_agent_card" name="test_card" time="0.1"><skipped type="pytest.skip" message="not declared"/></testcase>
<testcase classname="tests.mandatory.jsonrpc.test_json_rpc_compliance" name="test_teardown" time="0.1"/>
<testcase classname="tests.mandatory.jsonrpc.test_json_rpc_compliance" name="test_teardown" time="0.1"><error message="teardown failed"/></testcase>
</testsuite></testsuites>`

func TestParseJUnit(t *testing.T) {
	res, err := ParseJUnit(strings.NewReader(junitSample))
	require.NoError(t, err)
	require.Equal(t, []Result{
		{ID: "compatibility.core_operations.test_requirements::test_must_requirement[CORE-SEND-001-jsonrpc]", Binding: "jsonrpc", Outcome: Pass},
		{ID: "compatibility.core_operations.test_requirements::test_must_requirement[CORE-LIST-001-http_json]", Binding: "http_json", Outcome: Fail, Message: "AssertionError: CORE-LIST-001 failed"},
		{ID: "compatibility.grpc.test_status_codes.TestGrpcStatusCodes::test_task_not_found_returns_not_found", Binding: "grpc", Outcome: Fail, Message: "failed on setup"},
		{ID: "compatibility.core_operations.test_requirements::test_should_requirement[CORE-X-001-grpc]", Binding: "grpc", Outcome: XFail, Message: "SHOULD"},
		{ID: "compatibility.agent_card.test_agent_card::test_card", Binding: "other", Outcome: Skip, Message: "not declared"},
		// A test that passed and then failed in teardown is one failed result.
		{ID: "mandatory.jsonrpc.test_json_rpc_compliance::test_teardown", Binding: "jsonrpc", Outcome: Fail, Message: "teardown failed"},
	}, res)
	require.Contains(t, Summary(res), "total          1     3     1     1")

	_, err = ParseJUnit(strings.NewReader("<testsuites><testsuite>"))
	require.Error(t, err, "a truncated report is an error, not an empty run")
}

func TestParseExpected(t *testing.T) {
	runs := []string{"agent/1.0", "capgate/1.0"}
	exp, err := ParseExpected(strings.NewReader("# comment\n\ncapgate/1.0 a::b[grpc] capgate: the reason\n"), runs)
	require.NoError(t, err)
	require.Equal(t, []Expected{{Run: "capgate/1.0", ID: "a::b[grpc]", Reason: "capgate: the reason", Line: 3}}, exp)
	for in, want := range map[string]string{
		"capgate/1.0 a::b\n":     "want RUN TEST-ID REASON",
		"capgate/2.0 a::b why\n": `run "capgate/2.0" is not one of`,
		"capgate/1.0 a::b why\ncapgate/1.0 a::b another reason\n": "already listed on line 1",
	} {
		_, err := ParseExpected(strings.NewReader(in), runs)
		require.ErrorContains(t, err, want, in)
	}
}

// TestExpectedFailuresFile: the committed list parses, names only the harness's runs, and gives
// each line a reason that says whose failure it is.
func TestExpectedFailuresFile(t *testing.T) {
	f, err := os.Open("expected-failures.txt")
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	exp, err := ParseExpected(bufio.NewReader(f), runs)
	require.NoError(t, err)
	for _, e := range exp {
		whose := strings.SplitN(strings.TrimSpace(strings.TrimPrefix(e.Reason, NotReached)), " ", 2)[0]
		require.Contains(t, []string{"capgate", "capgate,", "agent", "TCK", "harness:"}, whose,
			"expected-failures.txt:%d: the reason starts with whose failure it is (capgate, agent, TCK, harness)", e.Line)
	}
}

func TestCompare(t *testing.T) {
	results := []Result{
		{ID: "t::listed_fails", Outcome: Fail},
		{ID: "t::unlisted_fails", Outcome: Fail, Message: "boom"},
		{ID: "t::listed_passes", Outcome: Pass},
		{ID: "t::listed_xfails", Outcome: XFail},
		{ID: "t::passes", Outcome: Pass},
	}
	expected := []Expected{
		{Run: "capgate/1.0", ID: "t::listed_fails", Line: 1},
		{Run: "capgate/1.0", ID: "t::listed_passes", Line: 2},
		{Run: "capgate/1.0", ID: "t::listed_xfails", Line: 3},
		{Run: "capgate/1.0", ID: "t::gone", Line: 4},
		{Run: "agent/1.0", ID: "t::passes", Line: 5}, // another run's line
	}
	got := Compare("capgate/1.0", results, nil, expected)
	require.Len(t, got, 4, "%q", got)
	require.Contains(t, got[0], "t::unlisted_fails: failed and is not in expected-failures.txt: boom")
	require.Contains(t, got[1], "t::listed_passes (expected-failures.txt:2): listed as failing but passed")
	require.Contains(t, got[2], "t::listed_xfails (expected-failures.txt:3): listed as failing but was an expected failure")
	require.Contains(t, got[3], "t::gone (expected-failures.txt:4): the TCK ran no such test")
	require.Empty(t, Compare("agent/1.0", []Result{{ID: "t::passes", Outcome: Fail}}, nil, expected), "each run is held to its own lines")
}

// TestCompareNotReached: with a control, a test skipped through capgate that the control ran
// must be listed as not reached, and a test listed so must be one.
func TestCompareNotReached(t *testing.T) {
	control := []Result{
		{ID: "t::listed_skips", Outcome: Pass}, {ID: "t::unlisted_skips", Outcome: Fail},
		{ID: "t::listed_runs", Outcome: Pass}, {ID: "t::both_skip", Outcome: Skip}, {ID: "t::listed_fails", Outcome: Pass},
	}
	results := []Result{
		{ID: "t::listed_skips", Outcome: Skip}, {ID: "t::unlisted_skips", Outcome: Skip, Message: "send_message failed"},
		{ID: "t::listed_runs", Outcome: Pass}, {ID: "t::both_skip", Outcome: Skip}, {ID: "t::listed_fails", Outcome: Fail},
	}
	expected := []Expected{
		{Run: "capgate/1.0", ID: "t::listed_skips", Reason: NotReached + " TCK defect: …", Line: 1},
		{Run: "capgate/1.0", ID: "t::listed_runs", Reason: NotReached + " TCK defect: …", Line: 2},
		{Run: "capgate/1.0", ID: "t::both_skip", Reason: NotReached + " TCK defect: …", Line: 3},
		{Run: "capgate/1.0", ID: "t::listed_fails", Reason: NotReached + " TCK defect: …", Line: 4},
	}
	got := Compare("capgate/1.0", results, control, expected)
	require.Len(t, got, 5, "%q", got)
	require.Contains(t, got[0], "t::unlisted_skips: skipped although the control ran it, and not in expected-failures.txt")
	require.Contains(t, got[1], "t::listed_fails: failed and is not in expected-failures.txt")
	require.Contains(t, got[2], "t::listed_runs (expected-failures.txt:2): listed as not reached but passed")
	require.Contains(t, got[3], "t::both_skip (expected-failures.txt:3): listed as not reached but was skipped")
	require.Contains(t, got[4], "t::listed_fails (expected-failures.txt:4): listed as not reached but failed")
	require.Empty(t, Compare("capgate/1.0", results[:1], control, expected[:1]))
}

func TestForwarder(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewReader(c)
				line, _ := r.ReadString('\n')
				_, _ = c.Write([]byte("echo " + line))
			}()
		}
	}()
	f, err := NewForwarder()
	require.NoError(t, err)
	f.SetTarget(echo.Addr().String())
	c, err := net.Dial("tcp", f.Addr())
	require.NoError(t, err)
	_, err = c.Write([]byte("hello\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "echo hello\n", line)
	require.NoError(t, c.Close())
	require.NoError(t, f.Close())
	_, err = net.Dial("tcp", f.Addr())
	require.Error(t, err, "closed: nothing listens on the port any more")
}
