package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// testBackend is a dashboard.Backend wired the way cmd/mcptape wires one:
// replay's tapes and profiles. Replay servers are stand-ins a test
// watches (start and stop), and profiles load from profiles by name.
type testBackend struct {
	profiles string
	start    func(ctx context.Context, id string) (string, error)
	stop     func(ctx context.Context, url string) error
}

var _ dashboard.Backend = (*testBackend)(nil)

func (b *testBackend) ExportTape(ctx context.Context, store capture.Store, ids []string, w io.Writer) error {
	return replay.Export(ctx, store, ids, w, "test")
}

func (b *testBackend) ImportTape(ctx context.Context, store capture.Store, r io.Reader) ([]string, error) {
	tape, err := replay.ReadTape(r)
	if err != nil {
		return nil, err
	}
	return replay.Import(ctx, store, tape, &replay.ImportOptions{Rename: true})
}

func (b *testBackend) CheckProfile(p []byte) error {
	_, err := replay.ReadProfile(bytes.NewReader(p))
	return err
}

func (b *testBackend) AnswerFromProfile(ctx context.Context, name, method string, params json.RawMessage) (json.RawMessage, error) {
	var p *replay.Profile
	if name != "" {
		var err error
		if p, err = replay.LoadProfile(filepath.Join(b.profiles, name+".json")); err != nil {
			return nil, err
		}
	}
	switch method {
	case protocol.MethodSampling:
		return p.AnswerSampling(params)
	case protocol.MethodElicitation:
		return p.AnswerElicitation(params)
	}
	return p.AnswerRoots(), nil
}

func (b *testBackend) StartReplay(ctx context.Context, id string) (string, error) {
	if b.start == nil {
		return "", errors.New("no replay servers in this test")
	}
	return b.start(ctx, id)
}

func (b *testBackend) StopReplay(ctx context.Context, url string) error {
	if b.stop == nil {
		return errors.New("no replay servers in this test")
	}
	return b.stop(ctx, url)
}

// testRecording is a testBackend in front of a recorder: its Sync, the
// routes its proxy serves, and replay.Send as the dashboard's own client.
type testRecording struct {
	*testBackend
	status func() dashboard.RecordingStatus
	rec    func() *capture.Recorder
	routes func() []dashboard.Route
}

var _ dashboard.Recording = (*testRecording)(nil)

func (r *testRecording) Status() dashboard.RecordingStatus {
	if r.status == nil {
		return dashboard.RecordingStatus{Recording: true, Free: -1}
	}
	return r.status()
}

func (r *testRecording) Sync(ctx context.Context) error {
	if r.rec == nil || r.rec() == nil {
		return nil
	}
	return r.rec().Sync(ctx)
}

func (r *testRecording) Routes() []dashboard.Route {
	if r.routes == nil {
		return nil
	}
	return r.routes()
}

func (r *testRecording) Send(ctx context.Context, sr dashboard.SendRequest) (any, error) {
	return replay.Send(ctx, &replay.SendOptions{URL: sr.URL, Method: sr.Method, Params: sr.Params, Body: sr.Body, Header: sr.Header,
		Version: sr.Version, Client: protocol.Implementation{Name: dashboard.ClientName}, Profile: &replay.Profile{}})
}
