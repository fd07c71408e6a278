package views

import (
	"fmt"
	"net/http"
)

func statusText(code int) string {
	return fmt.Sprintf("%d · %s", code, http.StatusText(code))
}
