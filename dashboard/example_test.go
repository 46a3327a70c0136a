package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/dashboard"
)

// A dashboard over a store: here an in-memory one with one session, served
// by httptest; `mcptape record` serves it from the recording process with
// Options.Feed = FeedPublish and RecorderOptions.OnBatch = Server.Publish.
func ExampleNew() {
	store := memstore.New()
	defer store.Close()
	start := time.Date(2026, 12, 2, 17, 43, 14, 0, time.UTC)
	_ = store.Write(context.Background(), &capture.Batch{Sessions: []*capture.Session{
		{ID: "20261202-174314-b862be", Start: start, End: start.Add(1500 * time.Millisecond), Calls: 3},
	}})

	d, err := dashboard.New(store, nil)
	if err != nil {
		panic(err)
	}
	defer d.Close()
	srv := httptest.NewServer(d)
	defer srv.Close()

	// Every request carries the dashboard's token (random unless
	// Options.Token sets one): a browser once in the URL, then a cookie;
	// a script as a bearer token.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/sessions?limit=10", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	var page struct {
		Sessions []struct {
			ID         string  `json:"id"`
			Calls      int     `json:"calls"`
			DurationMs float64 `json:"durationMs"`
		} `json:"sessions"`
		Total int `json:"total"`
	}
	_ = json.NewDecoder(res.Body).Decode(&page)
	fmt.Println(res.Header.Get("Content-Security-Policy") == dashboard.ContentSecurityPolicy)
	fmt.Println(page.Total, page.Sessions[0].ID, page.Sessions[0].Calls, page.Sessions[0].DurationMs)
	// Output:
	// true
	// 1 20261202-174314-b862be 3 1500
}
