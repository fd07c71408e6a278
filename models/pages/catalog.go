package pages

import (
	"context"

	"gantry/models/authz"
	"gantry/models/catalog"
	"gantry/models/run"
)

// CatalogLister lists the catalog's templates and reads one (catalog.Catalog).
type CatalogLister interface {
	CatalogReader
	All() []catalog.Entry
}

// Catalog builds the catalog and each template's page.
type Catalog struct {
	Catalog CatalogLister
}

// CatalogPage is the catalog as the reader may use it: the templates on offer, the
// refused ones for who may see why (admins and owners), and whether the reader may
// request from it.
type CatalogPage struct {
	Templates []catalog.Entry
	Refused   []catalog.Entry
	// CanRequest: the reader may ask for runs (the request form's "Request").
	CanRequest bool
}

// TemplatePage is one template's page and whether the reader may request it.
type TemplatePage struct {
	Entry      catalog.Entry
	CanRequest bool
}

// MayRequest reports whether s may open the request form: what the request service
// requires of any run, a dry run included (provisioning.plan).
func MayRequest(s authz.Subject) bool { return run.MayRequest(s) }

// List reads the catalog for the reader.
func (s Catalog) List(ctx context.Context) (CatalogPage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return CatalogPage{}, err
	}
	p := CatalogPage{CanRequest: MayRequest(subject)}
	for _, e := range s.Catalog.All() {
		switch {
		case e.Usable():
			p.Templates = append(p.Templates, e)
		case subject.Can(authz.PermEnvironmentsManage): // admins and owners see why a template is refused
			p.Refused = append(p.Refused, e)
		}
	}
	return p, nil
}

// Template reads template name's page (an unknown name is not found).
func (s Catalog) Template(ctx context.Context, name string) (TemplatePage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return TemplatePage{}, err
	}
	e, err := s.Catalog.Get(name)
	if err != nil {
		return TemplatePage{}, err
	}
	return TemplatePage{Entry: e, CanRequest: MayRequest(subject)}, nil
}
