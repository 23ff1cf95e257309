module github.com/d--j/go-milter

go 1.25.0

require (
	github.com/emersion/go-message v0.18.2
	golang.org/x/text v0.36.0
)
